from ios_bench.cli import main

main()
