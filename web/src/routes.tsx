// Every page of the dashboard: its address pattern, its component, and (for top-level pages) its entry
// in the navigation, in the order shown. A page with parameters (`/emails/:id`) gets them as props.
import type { ComponentType } from 'react';
import type { PageProps } from './router.tsx';
import { OverviewPage } from './pages/OverviewPage.tsx';
import { EmailsPage } from './pages/EmailsPage.tsx';
import { EmailPage } from './pages/EmailPage.tsx';
import { ReceivedEmailsPage } from './pages/ReceivedEmailsPage.tsx';
import { ReceivedEmailPage } from './pages/ReceivedEmailPage.tsx';
import { InboundRoutesPage } from './pages/InboundRoutesPage.tsx';
import { InboundRoutePage } from './pages/InboundRoutePage.tsx';
import { DomainsPage } from './pages/DomainsPage.tsx';
import { DomainPage } from './pages/DomainPage.tsx';
import { ApiKeysPage } from './pages/ApiKeysPage.tsx';
import { WebhooksPage } from './pages/WebhooksPage.tsx';
import { WebhookPage } from './pages/WebhookPage.tsx';
import { TemplatesPage } from './pages/TemplatesPage.tsx';
import { TemplatePage } from './pages/TemplatePage.tsx';
import { TopicsPage } from './pages/TopicsPage.tsx';
import { ContactPage } from './pages/ContactPage.tsx';
import { SegmentsPage } from './pages/SegmentsPage.tsx';
import { ContactPropertiesPage } from './pages/ContactPropertiesPage.tsx';
import { SuppressionsPage } from './pages/SuppressionsPage.tsx';
import { LogsPage } from './pages/LogsPage.tsx';
import { LogPage } from './pages/LogPage.tsx';
import { DestinationsPage } from './pages/DestinationsPage.tsx';
import { SettingsPage } from './pages/SettingsPage.tsx';
import { BroadcastsPage } from './pages/BroadcastsPage.tsx';
import { BroadcastPage } from './pages/BroadcastPage.tsx';
import { AutomationsPage } from './pages/AutomationsPage.tsx';
import { AutomationPage } from './pages/AutomationPage.tsx';
import { AutomationRunPage } from './pages/AutomationRunPage.tsx';
import { EventsPage } from './pages/EventsPage.tsx';
import { ContactImportsPage } from './pages/ContactImportsPage.tsx';
import { ContactImportPage } from './pages/ContactImportPage.tsx';

/** The navigation's groups; a page in none (Overview, Settings) stands alone. Their order is ROUTES'. */
export type NavGroup = 'Sending' | 'Audience' | 'Receiving' | 'Deliverability' | 'Developers';

export interface Route {
  path: string;
  page: ComponentType<PageProps>;
  /** The navigation's label, also the page's title; pages without one (details) are reached by links. */
  nav?: string;
  /** The navigation group of a page with `nav`. */
  group?: NavGroup;
  /** For pages without `nav`: the navigation entry to highlight. */
  section?: string;
}

// In the navigation's order: Overview, then each group's pages, then Settings.
export const ROUTES: Route[] = [
  { path: '/', page: OverviewPage, nav: 'Overview' },
  { path: '/emails', page: EmailsPage, nav: 'Emails', group: 'Sending' },
  { path: '/emails/:id', page: EmailPage, section: '/emails' },
  { path: '/templates', page: TemplatesPage, nav: 'Templates', group: 'Sending' },
  { path: '/templates/:id', page: TemplatePage, section: '/templates' },
  { path: '/broadcasts', page: BroadcastsPage, nav: 'Broadcasts', group: 'Sending' },
  { path: '/broadcasts/:id', page: BroadcastPage, section: '/broadcasts' },
  { path: '/automations', page: AutomationsPage, nav: 'Automations', group: 'Sending' },
  { path: '/automations/:id', page: AutomationPage, section: '/automations' },
  { path: '/automations/:id/runs/:run_id', page: AutomationRunPage, section: '/automations' },
  { path: '/events', page: EventsPage, nav: 'Events', group: 'Sending' },
  { path: '/topics', page: TopicsPage, nav: 'Topics & contacts', group: 'Audience' },
  { path: '/contacts/:id', page: ContactPage, section: '/topics' },
  { path: '/segments', page: SegmentsPage, nav: 'Segments', group: 'Audience' },
  { path: '/contact-properties', page: ContactPropertiesPage, nav: 'Contact properties', group: 'Audience' },
  { path: '/imports', page: ContactImportsPage, nav: 'Contact imports', group: 'Audience' },
  { path: '/imports/:id', page: ContactImportPage, section: '/imports' },
  { path: '/suppressions', page: SuppressionsPage, nav: 'Suppressions', group: 'Audience' },
  { path: '/received', page: ReceivedEmailsPage, nav: 'Received', group: 'Receiving' },
  { path: '/received/:id', page: ReceivedEmailPage, section: '/received' },
  { path: '/inbound-routes', page: InboundRoutesPage, nav: 'Inbound routes', group: 'Receiving' },
  { path: '/inbound-routes/:id', page: InboundRoutePage, section: '/inbound-routes' },
  { path: '/domains', page: DomainsPage, nav: 'Domains', group: 'Deliverability' },
  { path: '/domains/:id', page: DomainPage, section: '/domains' },
  { path: '/destinations', page: DestinationsPage, nav: 'Destinations', group: 'Deliverability' },
  { path: '/api-keys', page: ApiKeysPage, nav: 'API keys', group: 'Developers' },
  { path: '/webhooks', page: WebhooksPage, nav: 'Webhooks', group: 'Developers' },
  { path: '/webhooks/:id', page: WebhookPage, section: '/webhooks' },
  { path: '/logs', page: LogsPage, nav: 'Logs', group: 'Developers' },
  { path: '/logs/:id', page: LogPage, section: '/logs' },
  { path: '/settings', page: SettingsPage, nav: 'Settings' },
];

/** The navigation: pages standing alone and groups of pages, in the order shown. */
export type NavEntry = { kind: 'page'; route: Route } | { kind: 'group'; name: NavGroup; routes: Route[] };

/** Made once: the routes never change while the page runs. */
export const NAVIGATION: NavEntry[] = navigationOf(ROUTES);

function navigationOf(routes: Route[]): NavEntry[] {
  const entries: NavEntry[] = [];
  for (const route of routes) {
    if (!route.nav) continue;
    if (!route.group) {
      entries.push({ kind: 'page', route });
      continue;
    }
    const last = entries.at(-1);
    if (last?.kind === 'group' && last.name === route.group) last.routes.push(route);
    else entries.push({ kind: 'group', name: route.group, routes: [route] });
  }
  return entries;
}

/** The sign-in page's address. */
export const SIGN_IN_PATH = '/sign-in';
