// Every page of the dashboard: its address pattern, its component, and (for top-level pages) its entry
// in the navigation, in the order shown. A page with parameters (`/emails/:id`) gets them as props.
import { lazy, type ComponentType, type LazyExoticComponent } from 'react';
import type { PageProps } from './router.tsx';

/** A page's component, its code fetched when first shown. */
type PageComponent = LazyExoticComponent<ComponentType<PageProps>>;

/**
 * A page whose code is fetched when it is first opened: the first page costs only its own code and the
 * shared frame, not all 29 pages'. Each page module exports its component by name.
 */
function page<Name extends string>(
  load: () => Promise<Record<Name, ComponentType<PageProps>>>,
  name: Name,
): PageComponent {
  return lazy(async () => ({ default: (await load())[name] }));
}

const OverviewPage = page(() => import('./pages/OverviewPage.tsx'), 'OverviewPage');
const EmailsPage = page(() => import('./pages/EmailsPage.tsx'), 'EmailsPage');
const EmailPage = page(() => import('./pages/EmailPage.tsx'), 'EmailPage');
const ReceivedEmailsPage = page(() => import('./pages/ReceivedEmailsPage.tsx'), 'ReceivedEmailsPage');
const ReceivedEmailPage = page(() => import('./pages/ReceivedEmailPage.tsx'), 'ReceivedEmailPage');
const InboundRoutesPage = page(() => import('./pages/InboundRoutesPage.tsx'), 'InboundRoutesPage');
const InboundRoutePage = page(() => import('./pages/InboundRoutePage.tsx'), 'InboundRoutePage');
const DomainsPage = page(() => import('./pages/DomainsPage.tsx'), 'DomainsPage');
const DomainPage = page(() => import('./pages/DomainPage.tsx'), 'DomainPage');
const ApiKeysPage = page(() => import('./pages/ApiKeysPage.tsx'), 'ApiKeysPage');
const WebhooksPage = page(() => import('./pages/WebhooksPage.tsx'), 'WebhooksPage');
const WebhookPage = page(() => import('./pages/WebhookPage.tsx'), 'WebhookPage');
const TemplatesPage = page(() => import('./pages/TemplatesPage.tsx'), 'TemplatesPage');
const TemplatePage = page(() => import('./pages/TemplatePage.tsx'), 'TemplatePage');
const TopicsPage = page(() => import('./pages/TopicsPage.tsx'), 'TopicsPage');
const ContactPage = page(() => import('./pages/ContactPage.tsx'), 'ContactPage');
const SegmentsPage = page(() => import('./pages/SegmentsPage.tsx'), 'SegmentsPage');
const ContactPropertiesPage = page(() => import('./pages/ContactPropertiesPage.tsx'), 'ContactPropertiesPage');
const SuppressionsPage = page(() => import('./pages/SuppressionsPage.tsx'), 'SuppressionsPage');
const LogsPage = page(() => import('./pages/LogsPage.tsx'), 'LogsPage');
const LogPage = page(() => import('./pages/LogPage.tsx'), 'LogPage');
const DestinationsPage = page(() => import('./pages/DestinationsPage.tsx'), 'DestinationsPage');
const SettingsPage = page(() => import('./pages/SettingsPage.tsx'), 'SettingsPage');
const BroadcastsPage = page(() => import('./pages/BroadcastsPage.tsx'), 'BroadcastsPage');
const BroadcastPage = page(() => import('./pages/BroadcastPage.tsx'), 'BroadcastPage');
const AutomationsPage = page(() => import('./pages/AutomationsPage.tsx'), 'AutomationsPage');
const AutomationPage = page(() => import('./pages/AutomationPage.tsx'), 'AutomationPage');
const AutomationRunPage = page(() => import('./pages/AutomationRunPage.tsx'), 'AutomationRunPage');
const EventsPage = page(() => import('./pages/EventsPage.tsx'), 'EventsPage');
const ContactImportsPage = page(() => import('./pages/ContactImportsPage.tsx'), 'ContactImportsPage');
const ContactImportPage = page(() => import('./pages/ContactImportPage.tsx'), 'ContactImportPage');

/** The navigation's groups; a page in none (Overview, Settings) stands alone. Their order is ROUTES'. */
export type NavGroup = 'Sending' | 'Audience' | 'Receiving' | 'Deliverability' | 'Developers';

export interface Route {
  path: string;
  page: PageComponent;
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
