"""``python -m ckptctl``: the same command as the ``ckptctl`` script."""

from ckptctl.cli import main

if __name__ == "__main__":
    main()
