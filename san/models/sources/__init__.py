"""The sources of model weights, one module each: ``init`` (random weights of an explicit architecture, or of an
acquired folder's), ``package`` and ``local`` (a model folder inside an installed package or on this machine),
``package_parts`` (files of installed distributions concatenated into an archive or a GGUF file), ``onnx`` (a DINOv2
backbone read out of an installed distribution's ONNX graph), ``hub`` (a Hugging Face hub snapshot) and a series of
hub revisions, with the extractions that turn what a source fetched into a model
folder (an archive's model folder, a dual checkpoint's tower, an encoder-decoder's encoder stack, a multimodal
wrapper's text model, pickle weights as safetensors). Each source makes one trip and hands its files over as a
:class:`~san.models.sources.fetched.Fetched`; :func:`san.models.store.store` takes it from there.
"""
