"""Task plugins: the API (:mod:`lucidyolo.tasks.api`) and discovery (:mod:`lucidyolo.tasks.registry`)."""
