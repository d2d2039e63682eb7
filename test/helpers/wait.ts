/** Polls until the condition holds; fails after `timeoutMs`. */
export async function waitFor(
  condition: () => Promise<boolean> | boolean,
  timeoutMs = 5000,
  everyMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
