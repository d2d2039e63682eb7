// Where DMARC aggregate reports are sent: a mailbox of the return-path domain, whose MX is the inbound
// listener. Publish it as `rua=mailto:dmarc@<return-path domain>` in each sending domain's DMARC record.

/** The `rua` mailbox at the return-path domain. */
export const dmarcAddress = (returnPathDomain: string) => `dmarc@${returnPathDomain}`;
