"""`python -m collbench` is the same as the `collbench` console script."""

from collbench.cli.app import main

if __name__ == "__main__":
    main()
