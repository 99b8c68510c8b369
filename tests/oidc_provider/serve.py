"""Run the test OpenID provider: python -m tests.oidc_provider.serve --port PORT --data DIR
--client-id ID --client-secret SECRET --redirect-uri URI --user NAME:PASSWORD:EMAIL:GROUP1,GROUP2

Creates its database, signing key, one confidential client and one user, then serves HTTP on
127.0.0.1:PORT until terminated."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        sys.stderr.write("oidc-provider: " + (format % args) + "\n")


def _setup(args: argparse.Namespace) -> None:
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    key_file = data / "signing-key.pem"
    if not key_file.exists():
        from jwcrypto import jwk

        key_file.write_bytes(jwk.JWK.generate(kty="RSA", size=2048).export_to_pem(private_key=True, password=None))
    os.environ["OIDC_PROVIDER_KEY"] = str(key_file)
    os.environ["OIDC_PROVIDER_DB"] = str(data / "provider.sqlite3")
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_provider.settings"

    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0, interactive=False)
    for spec in args.user:
        name, password, email, groups = spec.split(":", 3)
        user = User.objects.create_user(name, email=email, password=password)
        user.groups.set(Group.objects.get_or_create(name=g)[0] for g in groups.split(",") if g)
    Application.objects.create(
        name="liqo-dash",
        client_id=args.client_id,
        client_secret=args.client_secret,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=args.redirect_uri,
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--redirect-uri", required=True)
    parser.add_argument("--user", action="append", default=[], help="NAME:PASSWORD:EMAIL:GROUP,GROUP")
    args = parser.parse_args()
    _setup(args)
    from django.core.wsgi import get_wsgi_application

    with make_server("127.0.0.1", args.port, get_wsgi_application(), _Server, _QuietHandler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
