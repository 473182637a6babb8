"""Export of the deployed graph (ONNX)."""
