"""``python -m sampling_core.cli``: the same as the ``samplehooks`` console script."""

from sampling_core.cli.app import main

main()
