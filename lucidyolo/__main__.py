"""``python -m lucidyolo`` is the ``lucid`` console script."""

from lucidyolo.cli.app import main

main()
