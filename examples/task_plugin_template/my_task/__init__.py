"""A lucid-yolo task plugin (template): ``task.py`` declares it, ``hooks.py`` does the work."""
