"""`python -m rocmft.serve.llamaboard`: LlamaBoard as LLaMA-Factory builds it (`create_ui`), launched here
rather than by `llamafactory-cli webui`, whose `run_web_ui` (llamafactory/webui/interface.py) opens a public
Gradio share link whenever GRADIO_SHARE=1 is in the environment and never asks who is there.

Here a share link is never opened, and on every address, loopback included, Gradio's login asks for user
`rocmft` and the password in ROCMFT_WEBUI_PASSWORD (rocmft generates one when it is not exported): LlamaBoard
loads models with trust_remote_code=True and starts any training command, so whoever reaches it runs code as
you, and every local account reaches 127.0.0.1. The password is taken out of the environment before the UI
starts, so the trainings LlamaBoard launches do not inherit it.
"""

from __future__ import annotations

import os
import sys

from .plan import PASSWORD_ENV, PASSWORD_MIN, WEBUI_USER


def main() -> int:
    host = os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1")
    password = os.environ.pop(PASSWORD_ENV, "")
    if len(password) < PASSWORD_MIN:
        print(f"error: {PASSWORD_ENV}: LlamaBoard runs code for whoever reaches it and needs a password of at "
              f"least {PASSWORD_MIN} characters, on {host} too (`make webui` generates one)", file=sys.stderr)
        return 2

    from llamafactory.extras.misc import fix_proxy, is_env_enabled
    from llamafactory.webui.interface import create_ui

    fix_proxy(ipv6_enabled=is_env_enabled("GRADIO_IPV6"))
    create_ui().queue().launch(share=False, server_name=host, auth=(WEBUI_USER, password), inbrowser=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
