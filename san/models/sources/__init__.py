"""Weight sources of model folders: each makes one trip to where a model's files are."""
