// A local OpenID provider for the SSO tests: panva's certified oidc-provider with one client and a few users.
// Usage: node provider.mjs   (configured from the environment; prints "ready <issuer>" once it listens)
//   OIDC_PORT=8345 OIDC_CLIENT_ID=dash OIDC_CLIENT_SECRET=s3cret
//   OIDC_REDIRECT_URIS=http://127.0.0.1:8000/accounts/sso/customer-1/login/callback/   (comma-separated)
//   OIDC_USERS=carol@acme.example,eve@globex.example   (each user signs in with the e-mail as login; sub is derived)
// Sign-in is oidc-provider's development login form: the e-mail as login, any password, no consent screen.
// POST /__test/tamper (on the same port) makes the next token response carry an ID token whose payload was
// changed after signing (its signature no longer matches), so a test sees the relying party refuse it.
import { createHash } from 'node:crypto';
import Provider from 'oidc-provider';

const port = Number(process.env.OIDC_PORT || 8345);
const issuer = `http://127.0.0.1:${port}`;
const users = new Map(
  (process.env.OIDC_USERS || '').split(',').filter(Boolean).map((email) => [email.trim(), email.trim()]),
);

// A stable, opaque subject per e-mail: the relying party must bind accounts to it, not to the e-mail.
export function subjectFor(email) {
  return `sub-${createHash('sha256').update(email).digest('hex').slice(0, 16)}`;
}

const accounts = new Map([...users.keys()].map((email) => [subjectFor(email), email]));

const configuration = {
  clients: [{
    client_id: process.env.OIDC_CLIENT_ID || 'dashboard',
    client_secret: process.env.OIDC_CLIENT_SECRET || 'dashboard-secret',
    redirect_uris: (process.env.OIDC_REDIRECT_URIS || '').split(',').filter(Boolean),
    token_endpoint_auth_method: 'client_secret_post',
  }],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  // Every authorization request must carry a PKCE challenge (S256).
  pkce: { required: () => true },
  // The dashboard is a first-party client: grant its scopes without a consent screen.
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid email profile');
    grant.addOIDCClaims(['email', 'email_verified', 'name']);
    await grant.save();
    return grant;
  },
  async findAccount(ctx, id) {
    // The development login form sends what was typed as the account id: the e-mail. Known e-mails map to their
    // subject; an already-derived subject (a later token request) maps back to its e-mail.
    const email = accounts.get(id) || (users.has(id) ? id : undefined);
    if (!email) return undefined;
    const sub = subjectFor(email);
    return {
      accountId: sub,
      async claims() {
        return { sub, email, email_verified: true, name: email.split('@')[0] };
      },
    };
  },
  cookies: { keys: ['oidc-test-cookie-key'] },
  ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 600, Grant: 600 },
};

const provider = new Provider(issuer, configuration);
let tamperNext = false;

provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === '/__test/tamper') {
    tamperNext = true;
    ctx.body = { tamper: 'next ID token' };
    return;
  }
  await next();
  if (ctx.path === '/token' && tamperNext && ctx.body && ctx.body.id_token) {
    tamperNext = false;
    const [header, payload, signature] = ctx.body.id_token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    // Same person, one claim added: only the signature can tell the token was changed.
    claims.groups = ['admins'];
    ctx.body = { ...ctx.body, id_token: [header, Buffer.from(JSON.stringify(claims)).toString('base64url'), signature].join('.') };
  }
});

// A known e-mail typed at the login form becomes its subject before the session is written.
const { interactionFinished } = provider;
provider.interactionFinished = async function finish(req, res, result, options) {
  if (result.login && users.has(result.login.accountId)) {
    result.login.accountId = subjectFor(result.login.accountId);
  } else if (result.login && !accounts.has(result.login.accountId)) {
    result = { error: 'access_denied', error_description: 'unknown user' };
  }
  return interactionFinished.call(this, req, res, result, options);
};

const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => { server.close(); process.exit(0); });
}
