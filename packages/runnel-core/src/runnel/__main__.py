from runnel.cli import main

main()
