"""`python -m gpuleak ARGS` runs the gpuleak command this package ships:
`python -m gpuleak run -- python train.py`, `python -m gpuleak report TRACE`, ..."""

import sys

from ._tool import main

if __name__ == "__main__":
    sys.exit(main())
