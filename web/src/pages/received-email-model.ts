import type { RouteAction } from './inbound-route-model.ts';
import type { ReceivedEmailListItem } from './ReceivedEmailsPage.tsx';

// A received message as the API gives it, and its authentication results as the page's rows.

interface AuthenticationResult {
  result?: string;
  domain?: string | null;
  selector?: string | null;
  policy?: string | null;
}

export interface Authentication {
  spf?: AuthenticationResult | null;
  dkim?: AuthenticationResult[] | AuthenticationResult | null;
  dmarc?: AuthenticationResult | null;
  arc?: AuthenticationResult | null;
}

/** What a forward or webhook action did once queued: the copy sent, the delivery queued, or why not. */
export type RouteOutcome =
  | { action: 'forward'; to: string; email_id?: string; skipped?: string }
  | { action: 'webhook'; endpoint_id: string; delivery_id?: string; skipped?: string };

interface AppliedRoute {
  route_id: string;
  actions: RouteAction[];
  outcomes?: RouteOutcome[];
}

export interface ReceivedEmail extends ReceivedEmailListItem {
  html: string | null;
  text: string | null;
  stripped_text: string | null;
  headers: Record<string, string>;
  received_for: string[];
  raw: { download_url: string; expires_at: string } | null;
  /** Mailroom's own, as the rest below: what the SMTP session said. */
  envelope?: { mail_from: string; client_address: string; helo: string; tls: boolean };
  size?: number;
  authentication: Authentication;
  /** null: not scanned (no spam filter configured, or it could not be reached). */
  spam: { verdict: 'ham' | 'spam'; score: number | null } | null;
  quarantined: boolean;
  in_reply_to_email_id: string | null;
  routes: AppliedRoute[];
}

export interface ReceivedAttachment {
  id: string;
  filename: string | null;
  content_type: string;
  size: number;
  download_url: string;
}

export interface CheckRow {
  key: string;
  check: string;
  result: string | undefined;
  details: string;
}

/** One row per check; DKIM has one per signature (none: a single "none" row). */
export function authenticationRows(authentication: Authentication | null | undefined): CheckRow[] {
  const found = authentication ?? {};
  const signatures = Array.isArray(found.dkim) ? found.dkim : found.dkim ? [found.dkim] : [];
  const domain = (entry: AuthenticationResult | null | undefined) => entry?.domain ?? '';
  const rows: CheckRow[] = [{ key: 'spf', check: 'SPF', result: found.spf?.result, details: domain(found.spf) }];
  if (signatures.length === 0) rows.push({ key: 'dkim', check: 'DKIM', result: undefined, details: 'not signed' });
  for (const [index, signature] of signatures.entries()) {
    const selector = signature.selector ? ` (selector ${signature.selector})` : '';
    rows.push({ key: `dkim-${index}`, check: 'DKIM', result: signature.result, details: domain(signature) + selector });
  }
  const policy = found.dmarc?.policy ? ` (policy ${found.dmarc.policy})` : '';
  rows.push({ key: 'dmarc', check: 'DMARC', result: found.dmarc?.result, details: domain(found.dmarc) + policy });
  rows.push({ key: 'arc', check: 'ARC', result: found.arc?.result, details: domain(found.arc) });
  return rows;
}
