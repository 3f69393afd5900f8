import sys

from culturelens.cli import main

sys.exit(main())
