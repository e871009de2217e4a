"""`python -m rocmft.serve.llamaboard`: LlamaBoard as LLaMA-Factory builds it (`create_ui`), launched here
rather than by `llamafactory-cli webui`, whose `run_web_ui` (llamafactory/webui/interface.py) opens a public
Gradio share link whenever GRADIO_SHARE=1 is in the environment and never asks who is there.

Here a share link is never opened, and beyond loopback Gradio's login asks for user `rocmft` and the
password in WEBUI_PASSWORD (rocmft generates one when it is not exported). The password is taken out of the
environment before the UI starts, so the trainings LlamaBoard launches do not inherit it.
"""

from __future__ import annotations

import os
import sys

from .plan import LOOPBACK, PASSWORD_ENV, WEBUI_USER


def main() -> int:
    host = os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1")
    password = os.environ.pop(PASSWORD_ENV, "")
    if host not in LOOPBACK and not password:
        print(f"error: {PASSWORD_ENV}: LlamaBoard listens on {host}, beyond this machine, and needs a password",
              file=sys.stderr)
        return 2

    from llamafactory.extras.misc import fix_proxy, is_env_enabled
    from llamafactory.webui.interface import create_ui

    fix_proxy(ipv6_enabled=is_env_enabled("GRADIO_IPV6"))
    auth = (WEBUI_USER, password) if host not in LOOPBACK else None
    create_ui().queue().launch(share=False, server_name=host, auth=auth, inbrowser=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
