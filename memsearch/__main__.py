import sys

try:
    from memsearch.cli.app import main
except KeyboardInterrupt:  # Ctrl-C while the command line is still loading
    sys.stderr.write("memsearch: interrupted\n")
    sys.exit(130)

main()
