// panva's oidc-provider with its FAPI 2.0 Security Profile on, for the
// FAPI 2.0 login tests: pushed authorization requests required (RFC 9126),
// DPoP required of the client (RFC 9449), PKCE S256, `iss` in every
// authorization response, ES256 keys of its own (made here with jose). One
// client, `fapi-app`: private_key_jwt with the public key in FAPI_CLIENT_JWK,
// the redirect URI in FAPI_REDIRECT_URI, the authorization code, refresh and
// client credentials grants. Its userinfo endpoint (/me) is the API that takes
// the DPoP-bound tokens. Prints {"port": N} on its first line; GET
// /admin/stats counts pushed requests, codes and client credentials tokens,
// and the errors it answered.
import { createServer } from 'node:http';
import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

const stats = { pushed: 0, codes: 0, client_credentials: 0, errors: [] };
const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;
const { privateKey } = await generateKeyPair('ES256', { extractable: true });
const signing = { ...(await exportJWK(privateKey)), kid: 'op-es256', alg: 'ES256', use: 'sig' };

const provider = new Provider(issuer, {
  jwks: { keys: [signing] },
  clients: [{
    client_id: 'fapi-app',
    token_endpoint_auth_method: 'private_key_jwt',
    token_endpoint_auth_signing_alg: 'ES256',
    jwks: { keys: [JSON.parse(process.env.FAPI_CLIENT_JWK)] },
    redirect_uris: [process.env.FAPI_REDIRECT_URI],
    grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
    response_types: ['code'],
    dpop_bound_access_tokens: true,
    id_token_signed_response_alg: 'ES256',
    scope: 'openid offline_access',
  }],
  scopes: ['openid', 'offline_access'],
  enabledJWA: {
    clientAuthSigningAlgValues: ['ES256', 'PS256', 'EdDSA'],
    idTokenSigningAlgValues: ['ES256'],
    dPoPSigningAlgValues: ['ES256', 'PS256', 'EdDSA'],
  },
  features: {
    fapi: { enabled: true, profile: '2.0' },
    pushedAuthorizationRequests: { enabled: true, requirePushedAuthorizationRequests: true },
    dPoP: { enabled: true },
    clientCredentials: { enabled: true },
    devInteractions: { enabled: true },
  },
  pkce: { required: () => true },
  issueRefreshToken: () => true,
  ttl: { AccessToken: 120, PushedAuthorizationRequest: 60, Interaction: 600, Session: 600, Grant: 600 },
});
provider.proxy = false;
provider.on('pushed_authorization_request.success', () => { stats.pushed += 1; });
provider.on('grant.success', (ctx) => {
  const grant = ctx.oidc.params?.grant_type;
  if (grant === 'authorization_code') stats.codes += 1;
  if (grant === 'client_credentials') stats.client_credentials += 1;
});
for (const event of ['pushed_authorization_request.error', 'grant.error', 'authorization.error', 'userinfo.error']) {
  provider.on(event, (ctx, error) => { stats.errors.push(`${event}: ${error.error}: ${error.error_description} (${error.error_detail ?? ""})`); });
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url === '/admin/stats') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(stats));
    return;
  }
  callback(req, res);
});
process.stdout.write(JSON.stringify({ port }) + '\n');
