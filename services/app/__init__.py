"""The flow a user drives: run, resume, report, export, compare and the rest (runs), what a sweep
will cost (plan), and the command line that parses and prints (cli)."""
