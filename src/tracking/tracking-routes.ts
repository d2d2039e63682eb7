import { Type } from 'typebox';
import type { FastifyRequest } from 'fastify';
import type { App } from '../platform/http/app-types.ts';
import { notFound } from '../platform/errors.ts';
import { recordClick, recordOpen } from './engagement.ts';
import { readTrackingToken } from './tracking-links.ts';

// The open pixel and the click redirect that addTracking (tracking-links.ts) puts in each recipient's
// copy. The token in the path is the whole credential: it names the message, the recipient and, for a
// click, the one URL to send the reader to. Nothing else in the request (query string, headers) is read,
// the Host included: a domain's tracking subdomain (a CNAME to MAILROOM_PUBLIC_URL's host, behind the
// operator's proxy) reaches the same routes.
//
// Recording is best effort: the reader gets their image or their redirect even when the database fails
// (the error is logged), because a broken link in a sent message is worse than a missed count. A HEAD
// request records nothing: people's clients GET; HEADs come from link checkers.

const TokenParams = Type.Object({ token: Type.String() });

/** A 1×1 GIF whose one pixel is transparent (43 bytes). */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==', 'base64');

export async function trackingRoutes(app: App) {
  const bestEffort = async (request: FastifyRequest, what: string, record: () => Promise<unknown>) => {
    if (request.method !== 'GET') return;
    try {
      await record();
    } catch (error) {
      request.log.error({ err: error, reqId: request.id }, `could not record ${what}`);
    }
  };

  app.get(
    '/t/o/:token',
    {
      config: { access: 'public' },
      schema: { summary: 'Open-tracking pixel: records an open, answers a 1×1 GIF', params: TokenParams },
    },
    async (request, reply) => {
      const target = readTrackingToken(app.signer, 'open', request.params.token);
      if (!target) throw notFound('Tracking link');
      const userAgent = request.headers['user-agent'];
      await bestEffort(request, 'an open', () =>
        recordOpen(app.db, { emailId: target.emailId, recipient: target.recipient, ...(userAgent && { userAgent }) }),
      );
      return reply.code(200).header('cache-control', 'no-store, private').type('image/gif').send(PIXEL);
    },
  );

  app.get(
    '/t/c/:token',
    {
      config: { access: 'public' },
      schema: { summary: 'Tracked link: records a click, redirects to the original URL', params: TokenParams },
    },
    async (request, reply) => {
      const target = readTrackingToken(app.signer, 'click', request.params.token);
      if (!target?.url) throw notFound('Tracking link');
      const url = target.url;
      const userAgent = request.headers['user-agent'];
      await bestEffort(request, 'a click', () =>
        recordClick(app.db, {
          emailId: target.emailId,
          recipient: target.recipient,
          url,
          ipAddress: request.ip,
          ...(userAgent && { userAgent }),
        }),
      );
      return reply.code(302).header('cache-control', 'no-store').header('location', redirectLocation(url)).send();
    },
  );
}

/**
 * The Location for a signed URL: the URL exactly as signed when it is plain printable ASCII with its
 * `scheme://`, so that it means the same whatever base a client resolves it against; otherwise its
 * serialization by the URL parser (same destination, with non-ASCII characters encoded for a header).
 */
function redirectLocation(url: string): string {
  return /^https?:\/\/[\x21-\x5b\x5d-\x7e]*$/i.test(url) ? url : new URL(url).href;
}
