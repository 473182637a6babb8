"""lucidyolo-cls: image classification on the YOLO26 backbone, as a lucid-yolo task plugin (``lucid fit cls``)."""

__version__ = "0.1.0"
