import { Type, type Static } from 'typebox';
import { compileBodyValidator } from '../platform/validation.ts';
import { SCHEDULED_AT_DESCRIPTION } from './scheduled-at.ts';

// The shape of one message, as the spec's table gives it. Only types and sizes are checked here (and
// feed the OpenAPI document); everything that needs reasoning is in validate-message.ts.

// errorMessage: what a value of neither form is told (platform/validation.ts).
const AddressList = Type.Union([Type.String(), Type.Array(Type.String())], {
  description: 'One address or a list; each `address` or `Name <address>`.',
  errorMessage: 'must be an address or an array of addresses, e.g. ["ada@example.com", "Bob <bob@example.com>"]',
});

const TagValue = Type.Union([Type.String({ maxLength: 256 }), Type.Number(), Type.Boolean()]);

export const EmailMessageSchema = Type.Object(
  {
    from: Type.Optional(
      Type.String({
        description:
          'Sender, `Name <address>` or an address, on a verified domain of the organization. Required unless the template supplies one.',
      }),
    ),
    to: AddressList,
    subject: Type.Optional(Type.String({ maxLength: 998, description: 'Required unless the template supplies one.' })),
    html: Type.Optional(Type.String()),
    text: Type.Optional(Type.String()),
    template: Type.Optional(
      Type.Object(
        {
          id: Type.String(),
          variables: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
        },
        { additionalProperties: false, description: 'Exclusive with html and text. Refused in batch entries.' },
      ),
    ),
    cc: Type.Optional(AddressList),
    bcc: Type.Optional(AddressList),
    reply_to: Type.Optional(AddressList),
    reply_tracking: Type.Optional(
      Type.Boolean({
        description:
          "Mailroom extension: true gives the message a signed reply address (reply+<token>@<its From domain>) as Reply-To, so replies come back tied to it; false gives none. Unset: the sending domain's reply_tracking. Ignored when the message has a reply_to.",
      }),
    ),
    scheduled_at: Type.Optional(Type.String({ description: SCHEDULED_AT_DESCRIPTION })),
    tags: Type.Optional(
      Type.Union(
        [
          Type.Record(Type.String({ maxLength: 256 }), TagValue),
          Type.Array(
            Type.Union([
              Type.String({ maxLength: 256 }),
              Type.Object({ name: Type.String({ maxLength: 256 }), value: TagValue }, { additionalProperties: false }),
            ]),
            { maxItems: 50 },
          ),
        ],
        {
          errorMessage:
            'must be an object of name → value, e.g. {"category": "receipt"}, or an array of { name, value }, ' +
            'e.g. [{"name": "category", "value": "receipt"}]',
        },
      ),
    ),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
    topic_id: Type.Optional(
      Type.String({
        description:
          'A topic of the organization: sent only to recipients subscribed to it, with a one-click unsubscribe. Refused in batch entries.',
      }),
    ),
    attachments: Type.Optional(
      Type.Array(
        Type.Object(
          {
            filename: Type.Optional(
              Type.String({ description: "Required with content; with path, defaults to the URL's last segment." }),
            ),
            content: Type.Optional(Type.String({ description: 'Base64. This or path is required.' })),
            path: Type.Optional(
              Type.String({
                description:
                  'An http(s) URL where the file is hosted: fetched once when the message is accepted (public addresses only).',
              }),
            ),
            content_type: Type.Optional(Type.String()),
            content_id: Type.Optional(
              Type.String({ description: 'For inline images: referenced as cid:<content_id>.' }),
            ),
          },
          { additionalProperties: false },
        ),
        { maxItems: 100 },
      ),
    ),
  },
  { additionalProperties: false, $id: 'EmailMessage' },
);

export type EmailMessage = Static<typeof EmailMessageSchema>;

export const SendResponseSchema = Type.Object({
  object: Type.Literal('email'),
  id: Type.String({ format: 'uuid' }),
});

/** Checks a message built outside an HTTP body (a batch entry, a message submitted over SMTP) against the schema. */
export const checkMessageShape = compileBodyValidator<EmailMessage>(EmailMessageSchema);
