import { connect } from 'node:net';

const CRLF = '\r\n';

/** A raw SMTP client, for what nodemailer will not say (a null sender by hand, SIZE, a hang-up mid-DATA). */
export async function openSmtp(port: number) {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => {});
  socket.setEncoding('utf8');
  const replies: string[] = [];
  let lines: string[] = [];
  let partial = '';
  let closed = false;
  let wake: (() => void) | undefined;
  socket.on('data', (chunk: string) => {
    partial += chunk;
    for (let end = partial.indexOf(CRLF); end >= 0; end = partial.indexOf(CRLF)) {
      lines.push(partial.slice(0, end));
      partial = partial.slice(end + 2);
      if (/^\d{3}(?!-)/.test(lines.at(-1)!)) {
        replies.push(lines.join('\n'));
        lines = [];
      }
    }
    wake?.();
  });
  socket.on('close', () => {
    closed = true;
    wake?.();
  });
  const reply = async (): Promise<string> => {
    while (replies.length === 0) {
      if (closed) throw new Error('connection closed without a reply');
      await new Promise<void>((resolve) => (wake = resolve));
    }
    return replies.shift()!;
  };
  return {
    reply,
    command: (line: string) => {
      socket.write(`${line}${CRLF}`);
      return reply();
    },
    write: (data: string) => void socket.write(data),
    end: () => void socket.destroy(),
  };
}
