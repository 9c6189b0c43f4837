"""`python -m collbench` is the same as the `collbench` console script."""

from collbench.cli import main

if __name__ == "__main__":
    main()
