"""Export of the deployed graph: ONNX, TorchScript, OpenVINO IR (``formats.FORMATS``), and their parity checks."""
