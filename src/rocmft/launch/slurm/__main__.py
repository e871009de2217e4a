"""`python -m rocmft.launch.slurm started|ended RUN_DIR [CODE]`: the sbatch script's bookkeeping calls."""

import sys

from .status import main

sys.exit(main())
