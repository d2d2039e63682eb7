// Destination sites as people read them, for the Destinations page and its Sources section.

export const PROVIDERS: Record<string, string> = {
  google: 'Google (Gmail, Workspace)',
  microsoft: 'Microsoft (Outlook, Microsoft 365)',
  yahoo: 'Yahoo (Yahoo, AOL)',
  apple: 'Apple (iCloud)',
  fastmail: 'Fastmail',
  zoho: 'Zoho',
  proton: 'Proton',
  gmx: 'GMX',
  webde: 'WEB.DE',
  mailru: 'Mail.ru',
  yandex: 'Yandex',
  relay: 'Your SMTP relay',
};

/** A site as people read it: a provider's name, the MX hosts of an `mx:` site, or the domain. */
export function siteName(site: string): string {
  if (PROVIDERS[site]) return PROVIDERS[site];
  if (site.startsWith('mx:')) return site.slice(3).split(',').join(', ');
  return site;
}
