from kernel_archive.cli import main

main()
