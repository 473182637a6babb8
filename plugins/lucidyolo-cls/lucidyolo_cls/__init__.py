"""lucidyolo-cls: image classification on the YOLO26 backbone, as a lucid-yolo task plugin (``lucid fit cls``)."""

__version__ = "1.0.0"
