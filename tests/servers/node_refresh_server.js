// An authorization server on @node-oauth/oauth2-server for the refresh token
// tests: a public client `cli-app`, refresh tokens rotated on every use (the
// library's default, the old one revoked through the model), and reuse
// detection added in the model (a revoked refresh token sent again revokes
// the whole login, as Auth0 and Okta do). Access tokens live ACCESS_SECONDS.
// Prints {"port": N} on its first line; /admin/login makes a login and
// returns its refresh token; /admin/revoke revokes a login; /admin/stats
// counts refreshes and reuses; /api takes the access tokens it issued.
'use strict';

const http = require('http');
const crypto = require('crypto');
const OAuth2Server = require('@node-oauth/oauth2-server');
const { Request, Response } = OAuth2Server;

const lifetime = Number(process.env.ACCESS_SECONDS || '2');
const client = { id: 'cli-app', grants: ['refresh_token'] };
const refreshTokens = new Map(); // token -> { family, revoked, scope }
const accessTokens = new Map(); // token -> { expires, family }
const revokedFamilies = new Set();
const stats = { refreshes: 0, reuses: 0 };

const model = {
  async getClient(id) {
    return id === client.id ? client : null;
  },
  async getRefreshToken(token) {
    stats.refreshes += 1;
    const found = refreshTokens.get(token);
    if (!found || revokedFamilies.has(found.family)) return null;
    if (found.revoked) {
      // A rotated refresh token used again: theft, by RFC 9700 4.14.2.
      stats.reuses += 1;
      revokedFamilies.add(found.family);
      return null;
    }
    return { refreshToken: token, client, user: { family: found.family }, scope: found.scope };
  },
  async revokeToken(token) {
    const found = refreshTokens.get(token.refreshToken);
    if (!found || found.revoked) return false;
    found.revoked = true;
    return true;
  },
  async saveToken(token, clientSaved, user) {
    accessTokens.set(token.accessToken, {
      expires: token.accessTokenExpiresAt,
      family: user.family,
    });
    if (token.refreshToken) {
      refreshTokens.set(token.refreshToken, { family: user.family, revoked: false, scope: token.scope });
    }
    return { ...token, client: clientSaved, user };
  },
  async getAccessToken(token) {
    const found = accessTokens.get(token);
    if (!found || revokedFamilies.has(found.family)) return null;
    return { accessToken: token, accessTokenExpiresAt: found.expires, client, user: { family: found.family } };
  },
  async verifyScope() {
    return true;
  },
};

const oauth = new OAuth2Server({
  model,
  accessTokenLifetime: lifetime,
  requireClientAuthentication: { refresh_token: false },
});

function reply(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', async () => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (url.pathname === '/admin/login') {
      const family = crypto.randomUUID();
      const token = crypto.randomBytes(24).toString('hex');
      refreshTokens.set(token, { family, revoked: false, scope: (url.searchParams.get('scope') || 'read').split(' ') });
      return reply(res, 200, { refresh_token: token, family });
    }
    if (url.pathname === '/admin/revoke') {
      revokedFamilies.add(url.searchParams.get('family'));
      return reply(res, 200, {});
    }
    if (url.pathname === '/admin/stats') {
      return reply(res, 200, { ...stats, revoked: revokedFamilies.size });
    }
    const request = new Request({
      method: req.method,
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body: Object.fromEntries(new URLSearchParams(body)),
    });
    const response = new Response(res);
    try {
      if (url.pathname === '/token') {
        await oauth.token(request, response);
      } else {
        await oauth.authenticate(request, response);
        response.body = { ok: true };
        response.status = 200;
      }
    } catch (e) {
      response.status = e.code || 500;
      response.body = { error: e.name, error_description: e.message };
    }
    res.writeHead(response.status, { 'content-type': 'application/json', ...response.headers });
    res.end(JSON.stringify(response.body));
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
