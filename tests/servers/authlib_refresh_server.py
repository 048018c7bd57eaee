"""An authorization server on Authlib (its Flask integration) for the refresh
token and login tests: a public client `cli-app`, Authlib's RefreshTokenGrant
with a new refresh token per use (INCLUDE_NEW_REFRESH_TOKEN) and the old one
revoked, and Authlib's device authorization grant (RFC 8628:
DeviceAuthorizationEndpoint and DeviceCodeGrant) with its RFC 8414 metadata.
Access tokens live ACCESS_SECONDS. Prints {"port": N} on its first line;
/admin/login makes a login and returns its refresh token; /admin/approve
approves (or with deny=1 refuses) a device login's user_code, as the person
would; /admin/stats counts refreshes, refresh tokens sent again after their
rotation, and device polls; /api takes the access tokens it issued."""

import json
import os
import secrets
import sys
import threading
import time

from authlib.integrations.flask_oauth2 import AuthorizationServer, ResourceProtector
from authlib.oauth2.rfc6749 import ClientMixin, TokenMixin, grants
from authlib.oauth2.rfc6750 import BearerTokenValidator
from authlib.oauth2.rfc8628 import (
    DEVICE_CODE_GRANT_TYPE,
    DeviceAuthorizationEndpoint,
    DeviceCodeGrant,
    DeviceCredentialDict,
)
from flask import Flask, jsonify, request
from werkzeug.serving import make_server

LIFETIME = int(os.environ.get("ACCESS_SECONDS", "2"))
lock = threading.Lock()
tokens = {}  # refresh token -> Token
access = {}  # access token -> Token
stats = {"refreshes": 0, "reuses": 0, "device_polls": 0, "device_logins": 0}
devices = {}  # device code -> DeviceCredentialDict
grants_by_user_code = {}  # user code -> approved (True) or refused (False)


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
        return grant_type in ("refresh_token", DEVICE_CODE_GRANT_TYPE)


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


class DeviceEndpoint(DeviceAuthorizationEndpoint):
    INTERVAL = 1
    EXPIRES_IN = 60

    def get_verification_uri(self):
        return "http://127.0.0.1:%d/activate" % http.server_port

    def save_device_credential(self, client_id, scope, data):
        with lock:
            devices[data["device_code"]] = DeviceCredentialDict(
                client_id=client_id,
                scope=scope,
                user_code=data["user_code"],
                expires_at=time.time() + self.EXPIRES_IN,
            )


class DeviceGrant(DeviceCodeGrant):
    def query_device_credential(self, device_code):
        with lock:
            stats["device_polls"] += 1
            return devices.get(device_code)

    def query_user_grant(self, user_code):
        with lock:
            if user_code not in grants_by_user_code:
                return None
            approved = grants_by_user_code[user_code]
            if approved:
                stats["device_logins"] += 1
            return {"id": user_code}, approved

    def should_slow_down(self, credential):
        return False


def save_token(token, req):
    if getattr(req, "refresh_token", None) is not None:
        scope = token.get("scope") or req.refresh_token.get_scope()
    else:
        scope = token.get("scope")
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
server.register_grant(DeviceGrant)
server.register_endpoint(DeviceEndpoint)


class Validator(BearerTokenValidator):
    def authenticate_token(self, token_string):
        with lock:
            return access.get(token_string)


protect = ResourceProtector()
protect.register_token_validator(Validator())


@app.post("/token")
def token_endpoint():
    return server.create_token_response()


@app.post("/device_authorization")
def device_authorization():
    return server.create_endpoint_response("device_authorization")


@app.get("/.well-known/oauth-authorization-server")
def metadata():
    base = "http://127.0.0.1:%d" % http.server_port
    return jsonify(
        issuer=base,
        token_endpoint=base + "/token",
        device_authorization_endpoint=base + "/device_authorization",
        grant_types_supported=["refresh_token", DEVICE_CODE_GRANT_TYPE],
        token_endpoint_auth_methods_supported=["none"],
    )


@app.get("/admin/approve")
def approve():
    with lock:
        grants_by_user_code[request.args["user_code"]] = request.args.get("deny") != "1"
    return jsonify(ok=True)


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
