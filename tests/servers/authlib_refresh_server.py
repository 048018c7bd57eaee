"""An authorization server on Authlib (its Flask integration) for the refresh
token tests: a public client `cli-app`, Authlib's RefreshTokenGrant with a new
refresh token per use (INCLUDE_NEW_REFRESH_TOKEN) and the old one revoked.
Access tokens live ACCESS_SECONDS. Prints {"port": N} on its first line;
/admin/login makes a login and returns its refresh token; /admin/stats counts
refreshes and refresh tokens sent again after their rotation; /api takes the
access tokens it issued."""

import json
import os
import secrets
import sys
import threading
import time

from authlib.integrations.flask_oauth2 import AuthorizationServer, ResourceProtector
from authlib.oauth2.rfc6749 import ClientMixin, TokenMixin, grants
from authlib.oauth2.rfc6750 import BearerTokenValidator
from flask import Flask, jsonify, request
from werkzeug.serving import make_server

LIFETIME = int(os.environ.get("ACCESS_SECONDS", "2"))
lock = threading.Lock()
tokens = {}  # refresh token -> Token
access = {}  # access token -> Token
stats = {"refreshes": 0, "reuses": 0}


class Client(ClientMixin):
    client_id = "cli-app"

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        return scope

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        return False

    def check_endpoint_auth_method(self, method, endpoint):
        return method == "none"

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return grant_type == "refresh_token"


CLIENT = Client()


class Token(TokenMixin):
    def __init__(self, user, scope, access_token=None, refresh_token=None):
        self.user = user
        self.scope = scope
        self.access_token = access_token
        self.refresh_token = refresh_token
        self.issued_at = time.time()
        # The refresh token's state: its rotation leaves the access token
        # issued with it valid until it expires.
        self.refresh_revoked = False

    def check_client(self, client):
        return client.get_client_id() == CLIENT.client_id

    def get_scope(self):
        return self.scope

    def get_expires_in(self):
        return LIFETIME

    def is_expired(self):
        return time.time() > self.issued_at + LIFETIME

    def is_revoked(self):
        return False


class RefreshTokenGrant(grants.RefreshTokenGrant):
    INCLUDE_NEW_REFRESH_TOKEN = True
    TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]

    def authenticate_refresh_token(self, refresh_token):
        with lock:
            stats["refreshes"] += 1
            token = tokens.get(refresh_token)
            if token is not None and token.refresh_revoked:
                stats["reuses"] += 1
                return None
            return token

    def authenticate_user(self, credential):
        return credential.user

    def revoke_old_credential(self, credential):
        with lock:
            credential.refresh_revoked = True


def save_token(token, req):
    scope = token.get("scope") or req.refresh_token.get_scope()
    saved = Token(req.user, scope, token["access_token"], token.get("refresh_token"))
    with lock:
        access[saved.access_token] = saved
        if saved.refresh_token:
            tokens[saved.refresh_token] = saved


app = Flask(__name__)
app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = True
app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {"refresh_token": LIFETIME}
server = AuthorizationServer(app, query_client=lambda cid: CLIENT if cid == CLIENT.client_id else None, save_token=save_token)
server.register_grant(RefreshTokenGrant)


class Validator(BearerTokenValidator):
    def authenticate_token(self, token_string):
        with lock:
            return access.get(token_string)


protect = ResourceProtector()
protect.register_token_validator(Validator())


@app.post("/token")
def token_endpoint():
    return server.create_token_response()


@app.get("/api")
@protect()
def api():
    return jsonify(ok=True)


@app.route("/admin/login", methods=["GET", "POST"])
def login():
    refresh = secrets.token_urlsafe(24)
    with lock:
        tokens[refresh] = Token({"id": secrets.token_hex(4)}, request.args.get("scope", "read"), None, refresh)
    return jsonify(refresh_token=refresh)


@app.get("/admin/stats")
def admin_stats():
    with lock:
        return jsonify(stats)


http = make_server("127.0.0.1", 0, app, threaded=True)
sys.stdout.write(json.dumps({"port": http.server_port}) + "\n")
sys.stdout.flush()
http.serve_forever()
