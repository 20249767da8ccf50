// A real OpenID Connect provider on loopback for the people tests:
// `node provider.mjs PORT REDIRECT_URI CLIENT_SECRET`. Its one client is
// `nuon` (client_secret_basic, PKCE required). Nobody types a password:
// the account that signs in is the authorization request's `login_hint`
// (an email address), finished through oidc-provider's own interaction
// API, and consent to `openid email profile` is given at once. It prints
// `listening` once it serves.
import http from 'node:http';
import crypto from 'node:crypto';
import Provider from 'oidc-provider';

const [port, redirectUri, clientSecret] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', use: 'sig', alg: 'RS256' };

const account = (email) => ({
  accountId: `acct-${crypto.createHash('sha256').update(email).digest('hex').slice(0, 16)}`,
  email,
});
const accounts = new Map();

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'nuon',
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  jwks: { keys: [jwk] },
  pkce: { required: () => true },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  cookies: { keys: ['nuon-test-cookie-key'] },
  features: { devInteractions: { enabled: false } },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(ctx, id) {
    const email = accounts.get(id);
    if (!email) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, email, email_verified: true, name: email.split('@')[0] };
      },
    };
  },
});

const app = provider.callback();
http.createServer(async (req, res) => {
  if (!req.url.startsWith('/interaction/')) return app(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    const { prompt, params, session } = details;
    if (prompt.name === 'login') {
      const hint = params.login_hint;
      if (!hint) throw new Error('no login_hint: the test names who signs in');
      const a = account(hint);
      accounts.set(a.accountId, a.email);
      await provider.interactionFinished(req, res, { login: { accountId: a.accountId } }, { mergeWithLastSubmission: false });
      return;
    }
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    grant.addOIDCScope('openid email profile');
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  } catch (e) {
    res.statusCode = 500;
    res.end(String(e && e.stack || e));
  }
}).listen(Number(port), '127.0.0.1', () => console.log('listening'));
