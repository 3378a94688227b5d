from memsearch.cli.app import main

main()
