"""One module per subcommand (torchtune style). Each defines HELP, add_arguments(parser) and run(args) -> int.

Modules here import nothing heavy at module level: `rocmft --help` and render/plan must start fast,
without torch, LLaMA-Factory or DeepSpeed.

May import: any package (the top of the house: nothing imports cli).
"""
