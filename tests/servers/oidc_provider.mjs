// An OpenID Connect provider (panva's oidc-provider, its own login and consent
// pages) on 127.0.0.1 for the real-browser login tests: a public native client
// `browser-cli` (loopback redirects on any port, RFC 8252), PKCE (S256 only),
// the device flow (RFC 8628), resource indicators (RFC 8707), dynamic
// registration (RFC 7591) and refresh tokens that rotate. Beside it, the
// protected-resource metadata (RFC 9728) of an API at /api that names it.
// With WEB_REDIRECT_URI set, also a confidential web client `web-app`
// (client_secret_basic, secret `web-app-secret`) that comes back there.
// With EXACT_REDIRECTS=1 it matches redirect URIs exactly, native clients'
// loopback ports too (as many servers do, whatever RFC 8252 section 7.3
// says). Prints {"port": N} on its first line; GET /admin/stats counts what
// the provider did, GET /admin/whois?token=T names whose access token T is
// (null once revoked or expired), and POST /admin/forget-clients deletes
// every registered client, as a provider that forgets idle ones does.
// Back-channel logout and RP-initiated logout are on: with WEB_BACKCHANNEL_URI
// set, the web client takes logout tokens there (its ID tokens and logout
// tokens carry `sid`), and WEB_POST_LOGOUT_URI is its post-logout redirect
// URI; GET /admin/stats counts the logout tokens sent (`backchannel`) and
// refused by the app (`backchannel_errors`). With PROVIDER_DEFAULTS=1 it
// issues refresh tokens as oidc-provider does by default (only for a granted
// `offline_access`, which an OpenID request keeps only with
// `prompt=consent`: OpenID Connect Core section 11), and ACCESS_TTL sets the
// access tokens' lifetime in seconds (60 by default). With RAR=1, Rich
// Authorization Requests (RFC 9396) for the type `payment_initiation` (a
// `creditorName` string required) and a confidential client `agent`
// (client_secret_basic, secret `agent-secret`) with the client credentials
// grant (and the web client takes the type too): each token is granted the
// details asked for (a code's, those of its authorization), GET /admin/rar?token=T
// says which, and POST /admin/rar-tamper makes it grant other details (the
// amount changed) until POST /admin/rar-honest; GET /admin/stats counts the
// client credentials grants (`client_credentials`). With CIBA=1, backchannel
// logins (OpenID Connect CIBA Core 1.0, poll mode, an interval of 1 s) for a
// confidential client `ciba-agent` (client_secret_basic, secret
// `ciba-secret`): the login_hint names the account, and a test "device"
// answers 1.5 s after each request: `alice` approves (with the first of the
// `acr_values` asked, as `acr`), `dave` approves without any `acr`, `bob`
// refuses, `carol` never answers, and `nobody` is no one the provider
// knows. GET /admin/ciba lists what each request asked (hint, binding
// message, acr_values, requested_expiry, scope, authorization details);
// GET /admin/stats counts the CIBA grants (`ciba`) and the polls answered
// `authorization_pending` (`ciba_pending`). With CIBA_PING_URI set, also a
// client `ciba-pinged` (secret `ciba-secret`) in ping mode, notified there
// (registered as https, which the provider requires, and called over plain
// HTTP on loopback); `ciba_pings` counts the notifications the app took.
import { createServer } from 'node:http';
import Provider, { errors } from 'oidc-provider';

const rar = process.env.RAR === '1';
const ciba = process.env.CIBA === '1';
const pingUri = ciba ? process.env.CIBA_PING_URI : undefined;
const cibaAsked = [];
let tamper = false;
const stats = { ciba: 0, ciba_pending: 0, ciba_pings: 0, client_credentials: 0, authorizations: 0, codes: 0, refreshes: 0, device: 0, registrations: 0, denied: 0, revocations: 0, backchannel: 0, backchannel_errors: 0 };
const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const accessTtl = Number(process.env.ACCESS_TTL || 60);
const defaults = process.env.PROVIDER_DEFAULTS === '1';
const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'browser-cli',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/callback'],
      grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
      response_types: ['code'],
    },
    ...(process.env.WEB_REDIRECT_URI ? [{
      client_id: 'web-app',
      client_secret: 'web-app-secret',
      application_type: 'web',
      token_endpoint_auth_method: 'client_secret_basic',
      redirect_uris: [process.env.WEB_REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      ...(rar ? { authorization_details_types: ['payment_initiation'] } : {}),
      ...(process.env.WEB_BACKCHANNEL_URI ? {
        backchannel_logout_uri: process.env.WEB_BACKCHANNEL_URI,
        backchannel_logout_session_required: true,
      } : {}),
      ...(process.env.WEB_POST_LOGOUT_URI ? {
        post_logout_redirect_uris: [process.env.WEB_POST_LOGOUT_URI],
      } : {}),
    }] : []),
    ...(rar ? [{
      client_id: 'agent',
      client_secret: 'agent-secret',
      token_endpoint_auth_method: 'client_secret_basic',
      redirect_uris: [],
      grant_types: ['client_credentials'],
      response_types: [],
      authorization_details_types: ['payment_initiation'],
    }] : []),
    ...(ciba ? [{
      client_id: 'ciba-agent',
      client_secret: 'ciba-secret',
      token_endpoint_auth_method: 'client_secret_basic',
      redirect_uris: [],
      response_types: [],
      grant_types: ['urn:openid:params:grant-type:ciba', 'refresh_token'],
      backchannel_token_delivery_mode: 'poll',
      ...(rar ? { authorization_details_types: ['payment_initiation'] } : {}),
    }] : []),
    ...(pingUri ? [{
      client_id: 'ciba-pinged',
      client_secret: 'ciba-secret',
      token_endpoint_auth_method: 'client_secret_basic',
      redirect_uris: [],
      response_types: [],
      grant_types: ['urn:openid:params:grant-type:ciba', 'refresh_token'],
      backchannel_token_delivery_mode: 'ping',
      backchannel_client_notification_endpoint: pingUri.replace(/^http:/, 'https:'),
    }] : []),
  ],
  scopes: ['openid', 'offline_access', 'read'],
  // A backchannel login's ID token says how the person signed in.
  ...(ciba ? { claims: { acr: null, sid: null, auth_time: null, iss: null, openid: ['sub', 'acr', 'auth_time'] } } : {}),
  features: {
    devInteractions: { enabled: true },
    deviceFlow: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    backchannelLogout: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    clientCredentials: { enabled: rar },
    ciba: {
      enabled: ciba,
      deliveryModes: ['poll', 'ping'],
      processLoginHint: async (ctx, hint) => (hint === 'nobody' ? undefined : hint),
      processLoginHintToken: async () => undefined,
      verifyUserCode: async () => {},
      validateRequestContext: async () => {},
      async validateBindingMessage(ctx, message) {
        if (message !== undefined && (message.length > 256 || /[\u0000-\u001f\u007f]/u.test(message))) {
          throw new errors.InvalidBindingMessage('binding_message must be short plain text');
        }
      },
      async triggerAuthenticationDevice(ctx, request, account) {
        ctx.body.interval = 1;
        cibaAsked.push({
          login_hint: request.params.login_hint ?? null,
          binding_message: request.params.binding_message ?? null,
          acr_values: request.params.acr_values ?? null,
          requested_expiry: request.params.requested_expiry ?? null,
          scope: request.scope,
          authorization_details: request.params.authorization_details ?? null,
        });
        setTimeout(() => device(request, account.accountId).catch((e) => {
          process.stderr.write(`the CIBA device failed: ${e.message}\n`);
        }), 1500);
      },
    },
    richAuthorizationRequests: {
      enabled: rar,
      types: {
        payment_initiation: {
          validate(ctx, detail) {
            if (typeof detail.creditorName !== 'string') {
              throw new errors.InvalidAuthorizationDetails('payment_initiation needs a creditorName');
            }
          },
        },
      },
      authorizationDetailsForAccessToken(ctx, token, source) {
        const asked = ctx.oidc.params.authorization_details
          ? JSON.parse(ctx.oidc.params.authorization_details)
          : source?.rar;
        if (!tamper || !asked) return asked;
        return asked.map((detail) => ({ ...detail, amount: '9999.00' }));
      },
      authorizationDetailsForGrantSource: (ctx) => (ctx.oidc.params.authorization_details
        ? JSON.parse(ctx.oidc.params.authorization_details)
        : ctx.oidc.grant?.rar),
      authorizationDetailsForIntrospection: (ctx, token) => token.rar,
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: 'read',
        audience: resource,
        accessTokenTTL: accessTtl,
        accessTokenFormat: 'opaque',
      }),
    },
  },
  // Its outgoing requests (the logout tokens it posts) refuse special-use
  // addresses, loopback among them; the app here is on 127.0.0.1.
  fetch: (url, options) => {
    const { dispatcher, ...rest } = options;
    const target = pingUri && String(url) === pingUri.replace(/^http:/, 'https:') ? pingUri : url;
    return fetch(target, rest).then((response) => {
      if (target === pingUri && response.ok) stats.ciba_pings += 1;
      return response;
    });
  },
  ...(defaults ? {} : { issueRefreshToken: () => true }),
  rotateRefreshToken: () => true,
  ttl: {
    AccessToken: accessTtl, RefreshToken: 3600, DeviceCode: 120, Interaction: 600, Session: 600, Grant: 600,
    BackchannelAuthenticationRequest: (ctx) => Math.min(600, +(ctx?.oidc?.params.requested_expiry ?? 600)),
  },
});
provider.proxy = false;

// The person's device, answering a backchannel login as its account does.
async function device(request, who) {
  if (who === 'bob') {
    await provider.backchannelResult(request, new errors.AccessDenied('the person refused'));
    return;
  }
  if (who !== 'alice' && who !== 'dave') return;
  const grant = new provider.Grant({ accountId: request.accountId, clientId: request.clientId });
  grant.addOIDCScope(request.scope);
  for (const resource of [request.resource ?? []].flat()) grant.addResourceScope(resource, 'read');
  if (request.params.authorization_details) grant.rar = JSON.parse(request.params.authorization_details);
  await grant.save();
  const acr = who === 'alice' ? request.params.acr_values?.split(' ')[0] : undefined;
  await provider.backchannelResult(request, grant, { acr, authTime: Math.floor(Date.now() / 1000) });
}
if (process.env.EXACT_REDIRECTS === '1') {
  provider.Client.prototype.redirectUriAllowed = function exactly(value) {
    return this.redirectUris.includes(value);
  };
}
const registered = [];
provider.on('authorization.accepted', () => { stats.authorizations += 1; });
provider.on('grant.success', (ctx) => {
  const grant = ctx.oidc.params?.grant_type;
  if (grant === 'authorization_code') stats.codes += 1;
  if (grant === 'client_credentials') stats.client_credentials += 1;
  if (grant === 'urn:openid:params:grant-type:ciba') stats.ciba += 1;
  if (grant === 'refresh_token') stats.refreshes += 1;
  if (grant === 'urn:ietf:params:oauth:grant-type:device_code') stats.device += 1;
});
provider.on('registration_create.success', (ctx, client) => {
  stats.registrations += 1;
  registered.push(client.clientId);
});
provider.on('backchannel.success', () => { stats.backchannel += 1; });
provider.on('backchannel.error', (ctx, err) => {
  stats.backchannel_errors += 1;
  process.stderr.write(`backchannel logout failed: ${err.message}\n`);
});
provider.on('end_session.success', () => { stats.end_sessions = (stats.end_sessions ?? 0) + 1; });
provider.on('authorization.error', (ctx, error) => { if (error.error === 'access_denied') stats.denied += 1; });
provider.on('grant.error', (ctx, error) => {
  if (error.error === 'access_denied') stats.denied += 1;
  if (error.error === 'authorization_pending') stats.ciba_pending += 1;
});

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url === '/.well-known/oauth-protected-resource/api') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ resource: `${issuer}/api`, authorization_servers: [issuer], scopes_supported: ['openid', 'read'] }));
    return;
  }
  if (req.url.startsWith('/admin/whois?')) {
    const token = new URL(req.url, issuer).searchParams.get('token');
    provider.AccessToken.find(token).then((found) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ sub: found?.accountId ?? null }));
    });
    return;
  }
  if (req.url.startsWith('/admin/rar?')) {
    const token = new URL(req.url, issuer).searchParams.get('token');
    Promise.all([provider.ClientCredentials.find(token), provider.AccessToken.find(token)])
      .then(([machine, person]) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ rar: (machine ?? person)?.rar ?? null }));
      });
    return;
  }
  if (req.method === 'POST' && (req.url === '/admin/rar-tamper' || req.url === '/admin/rar-honest')) {
    tamper = req.url === '/admin/rar-tamper';
    res.end('{}');
    return;
  }
  if (req.url === '/admin/ciba') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(cibaAsked));
    return;
  }
  if (req.method === 'POST' && req.url === '/admin/forget-clients') {
    Promise.all(registered.splice(0).map((id) => provider.Client.adapter.destroy(id)))
      .then(() => res.end('{}'));
    return;
  }
  if (req.method === 'POST' && req.url === '/token/revocation') stats.revocations += 1;
  if (req.url === '/admin/stats') {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(stats));
    return;
  }
  callback(req, res);
});
process.stdout.write(JSON.stringify({ port }) + '\n');
