"""The top layer: the command line (`main`: parse, call one function, print) and how things
look on a terminal (`console`, `display`, `progress`). Nothing below this package prints."""
