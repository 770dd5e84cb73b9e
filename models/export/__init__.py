"""Export scripts that turn third-party checkpoints into the ONNX files `models/` loads."""
