// The owner's address, written next to the store so other windows can attach: `<dataDir>/endpoint.json`.
// Holds no secret (the token lives in SecretStorage, shared by the profile's windows).
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { ENDPOINT_RECORD_FILE } from '../constants';

export interface EndpointRecord {
  pid: number;
  url: string;
  port: number;
}

export function endpointRecordPath(dataDir: string): string {
  return join(dataDir, ENDPOINT_RECORD_FILE);
}

export async function writeEndpointRecord(dataDir: string, record: EndpointRecord): Promise<void> {
  const path = endpointRecordPath(dataDir);
  const tmp = `${path}.${process.pid}.tmp`;
  await fs.writeFile(tmp, JSON.stringify(record), { mode: 0o600 });
  await fs.rename(tmp, path);
}

export async function readEndpointRecord(dataDir: string): Promise<EndpointRecord | undefined> {
  let text: string;
  try {
    text = await fs.readFile(endpointRecordPath(dataDir), 'utf8');
  } catch {
    return undefined;
  }
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    if (!Number.isInteger(v['pid']) || typeof v['url'] !== 'string' || !Number.isInteger(v['port'])) return undefined;
    const url = new URL(v['url']);
    // Only ever attach to a loopback listener.
    if (url.protocol !== 'http:' || !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) return undefined;
    return { pid: v['pid'] as number, url: v['url'].replace(/\/+$/, ''), port: v['port'] as number };
  } catch {
    return undefined;
  }
}

/** Removes the record if it is still ours. */
export async function removeEndpointRecord(dataDir: string, pid: number): Promise<void> {
  const current = await readEndpointRecord(dataDir);
  if (current && current.pid === pid) await fs.rm(endpointRecordPath(dataDir), { force: true });
}
