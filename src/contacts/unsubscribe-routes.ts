import { Type } from 'typebox';
import type { FastifyReply } from 'fastify';
import type { App } from '../platform/http/app-types.ts';
import { notFound } from '../platform/errors.ts';
import { chooseOnPreferencePage, preferencePage, unsubscribeFromAll, unsubscribeFromTopic } from './contact-topics.ts';
import { findTopic } from './topics.ts';
import { readUnsubscribeToken, type UnsubscribeTarget } from './unsubscribe-link.ts';

// The target of the List-Unsubscribe header of a topic send or a broadcast copy (RFC 8058), and of a
// broadcast's {{{RESEND_UNSUBSCRIBE_URL}}}. A mail client's one-click button POSTs to it; a person who
// opens the link in a browser GETs it and is shown a confirmation button, because link scanners and
// previews fetch GETs and must not unsubscribe anyone. The token (unsubscribe-link.ts) is the whole
// credential: it names one address and one topic, signed. A link that names no topic (a broadcast sent
// without one) unsubscribes the address from every broadcast of the organization (contacts.unsubscribed),
// and its pages say so.
//
// Below the one-click form, the page lists the contact's preferences (contact-topics.ts preferencePage:
// the message's topic, the public topics, the private ones they are subscribed to), each with a button
// that POSTs to /unsubscribe/:token/topics/:topic/opt_in or opt_out. The same token is the credential.

const TokenParams = Type.Object({ token: Type.String() });
const ChoiceParams = Type.Object({
  token: Type.String(),
  topic: Type.String(),
  subscription: Type.Union([Type.Literal('opt_in'), Type.Literal('opt_out')]),
});

/** Far above the one-click body (`List-Unsubscribe=One-Click`), far below the API's limit. */
const BODY_LIMIT = 64 * 1024;

/** No framing, no scripts, nothing loaded from elsewhere; the form may post only back here. */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

export async function unsubscribeRoutes(app: App) {
  // RFC 8058 clients POST `List-Unsubscribe=One-Click` as a form (urlencoded or multipart), and some send
  // other types or none: these routes accept any body and read none of it. The parsers are this
  // plugin's own; the rest of the API keeps its JSON-only ones.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_request, _body, done) =>
    done(null, undefined),
  );
  // The answer depends on state that the POST changes, and the token is a credential: never cache.
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
  });

  const targetOf = (token: string): UnsubscribeTarget => {
    const target = readUnsubscribeToken(app.signer, token);
    if (!target) throw notFound('Unsubscribe link');
    return target;
  };
  const topicName = async (target: UnsubscribeTarget) =>
    target.topicId === null ? undefined : (await findTopic(app.db, target.organizationId, target.topicId))?.name;

  /**
   * The preference list, or nothing for an address that is not a contact. Its forms post to paths
   * relative to the page's own URL (`toUnsubscribe` leads back to /unsubscribe/), so that they work
   * whatever prefix a proxy put before it.
   */
  async function preferences(target: UnsubscribeTarget, token: string, toUnsubscribe: string, saved?: string) {
    const page = await preferencePage(app.db, target);
    if (!page || page.topics.length === 0) return '';
    const rows = page.topics.map((topic) => {
      const subscribed = topic.subscription === 'opt_in';
      const action = `${toUnsubscribe}${encodeURIComponent(token)}/topics/${topic.id}/${subscribed ? 'opt_out' : 'opt_in'}`;
      const name = escapeHtml(topic.name);
      return `<li><strong>${name}</strong>${topic.description ? ` – ${escapeHtml(topic.description)}` : ''}
<br>${subscribed ? 'Subscribed' : 'Not subscribed'}
<form method="post" action="${escapeHtml(action)}"><button type="submit">${subscribed ? 'Unsubscribe from' : 'Subscribe to'} ${name}</button></form></li>`;
    });
    return `<h2>Your subscriptions</h2>
${saved ? `<p role="status">${saved}</p>\n` : ''}${
      page.unsubscribedFromAll
        ? '<p>This address is unsubscribed from all messages of this sender: no topic reaches it.</p>\n'
        : ''
    }<ul>
${rows.join('\n')}
</ul>`;
  }

  app.get(
    '/unsubscribe/:token',
    {
      config: { access: 'public' },
      schema: { summary: 'One-click unsubscribe: confirmation page (changes nothing)', params: TokenParams },
    },
    async (request, reply) => {
      const target = targetOf(request.params.token);
      const topic = await topicName(target);
      // No action attribute: the form posts back to this very URL, whatever prefix a proxy put before it.
      const question =
        target.topicId === null
          ? `<p>Stop receiving every broadcast of this sender at <strong>${escapeHtml(target.address)}</strong>?</p>
<p>This unsubscribes the address from all of their broadcasts, not only the one this link came in.</p>`
          : `<p>Stop receiving ${topicLabel(topic)} at <strong>${escapeHtml(target.address)}</strong>?</p>`;
      return sendPage(
        reply,
        'Unsubscribe',
        `${question}
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>
${await preferences(target, request.params.token, '')}`,
      );
    },
  );

  app.post(
    '/unsubscribe/:token',
    {
      config: { access: 'public' },
      schema: {
        summary:
          'One-click unsubscribe (RFC 8058): opt the address out of the topic (a link without one: out of every broadcast)',
        params: TokenParams,
      },
    },
    async (request, reply) => {
      const target = targetOf(request.params.token);
      if (target.topicId === null) {
        await unsubscribeFromAll(app.db, target);
        return sendPage(
          reply,
          'Unsubscribed',
          `<p>You are unsubscribed from all broadcasts of this sender.</p>
<p><strong>${escapeHtml(target.address)}</strong> will no longer receive any of their broadcasts.</p>
${await preferences(target, request.params.token, '')}`,
        );
      }
      const topic = await topicName(target);
      await unsubscribeFromTopic(app.db, target);
      return sendPage(
        reply,
        'Unsubscribed',
        `<p>You are unsubscribed from ${topicLabel(topic)}.</p>
<p><strong>${escapeHtml(target.address)}</strong> will no longer receive these messages.</p>
${await preferences(target, request.params.token, '')}`,
      );
    },
  );

  app.post(
    '/unsubscribe/:token/topics/:topic/:subscription',
    {
      config: { access: 'public' },
      schema: {
        summary: "Preference page: opt the link's address in or out of a topic the page lists",
        params: ChoiceParams,
      },
    },
    async (request, reply) => {
      const { token, topic, subscription } = request.params;
      const target = targetOf(token);
      if (!(await chooseOnPreferencePage(app.db, target, topic, subscription))) throw notFound('Topic');
      const name = (await findTopic(app.db, target.organizationId, topic))?.name;
      const saved = `${subscription === 'opt_in' ? 'Subscribed to' : 'Unsubscribed from'} ${topicLabel(name)}.`;
      // This URL is three segments below /unsubscribe/: the forms' paths climb back up.
      return sendPage(reply, 'Your subscriptions', await preferences(target, token, '../../../', saved));
    },
  );
}

const topicLabel = (name: string | undefined) =>
  name === undefined ? 'this list' : `<strong>${escapeHtml(name)}</strong>`;

function sendPage(reply: FastifyReply, title: string, body: string) {
  return reply
    .type('text/html; charset=utf-8')
    .header('content-security-policy', CONTENT_SECURITY_POLICY)
    .header('referrer-policy', 'no-referrer')
    .send(
      `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${title}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;line-height:1.5}</style>
</head><body><h1>${title}</h1>
${body}
</body></html>
`,
    );
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
