from imagekit.cli.main import main

main()
