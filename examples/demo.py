"""Run the betterdb-memory demo (``make demo``): see ``betterdb_memory/demo.py``."""

from betterdb_memory.demo import main

if __name__ == "__main__":
    main()
