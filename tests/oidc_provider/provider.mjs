// An independent OpenID provider for the single sign-on tests: the npm package oidc-provider (not
// Python, not written for the dashboard), on a loopback port, with one confidential client and the
// accounts of a JSON file. Its built-in development login form (devInteractions) signs in any account
// of the file by its sub (the password is not checked); consent is granted to the one client.
//
//   node tests/oidc_provider/provider.mjs --port 5556 --client-id ID --client-secret SECRET \
//        --redirect-uri http://127.0.0.1:8000/oidc/callback/ --accounts accounts.json
//
// accounts.json: [{"sub": "olga-1", "preferred_username": "olga", "email": "...", "groups": [...]}, ...]
// The issuer is http://127.0.0.1:<port>; a second instance on another port is another issuer (its
// cookies carry the port in their names, so two instances can share a browser).
// Prints "listening <issuer>" once it answers.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true },
    accounts: { type: 'string' },
    'id-token-ttl': { type: 'string', default: '600' },
  },
});
for (const name of ['port', 'client-id', 'client-secret', 'redirect-uri', 'accounts']) {
  if (!args[name]) {
    console.error(`missing --${name}`);
    process.exit(2);
  }
}

const port = Number(args.port);
const issuer = `http://127.0.0.1:${port}`;
const accounts = new Map(JSON.parse(readFileSync(args.accounts, 'utf8')).map((a) => [String(a.sub), a]));
const clientId = args['client-id'];

const configuration = {
  clients: [
    {
      client_id: clientId,
      client_secret: args['client-secret'],
      redirect_uris: args['redirect-uri'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      // mozilla-django-oidc sends the secret in the token request's body.
      token_endpoint_auth_method: 'client_secret_post',
    },
  ],
  // Scopes and the claims each releases; "groups" is the dashboard's role and scope source.
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
    groups: ['groups'],
  },
  async findAccount(ctx, sub) {
    const account = accounts.get(String(sub));
    if (!account) return undefined;
    return {
      accountId: String(sub),
      async claims() {
        return { email_verified: Boolean(account.email), ...account, sub: String(sub) };
      },
    };
  },
  // First-party client: no consent screen; every scope and claim asked for is granted.
  async loadExistingGrant(ctx) {
    const { client, session, params } = ctx.oidc;
    if (client.clientId !== clientId || !session.accountId) return undefined;
    const grantId = ctx.oidc.result?.consent?.grantId || session.grantIdFor(client.clientId);
    const grant = (grantId && (await ctx.oidc.provider.Grant.find(grantId)))
      || new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
    grant.addOIDCScope(String(params.scope || 'openid'));
    await grant.save();
    return grant;
  },
  features: {
    devInteractions: { enabled: true },
  },
  cookies: {
    names: { session: `_session_${port}`, interaction: `_interaction_${port}`, resume: `_resume_${port}` },
    keys: [`test-cookie-key-${port}`],
  },
  ttl: {
    IdToken: Number(args['id-token-ttl']),
    AccessToken: 600,
    AuthorizationCode: 60,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
  },
};

const provider = new Provider(issuer, configuration);
provider.on('server_error', (_ctx, error) => console.error('server_error', error));
provider.listen(port, '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
