// The sampling fields' zod types for every door that validates them with zod (LMSP and /responses, MCP tool
// arguments), from the one table (runtime/requestFields.ts): the same range and the same message everywhere.
import { z } from 'zod';
import { SAMPLING_FIELDS, type FieldRange, type SamplingField } from '../../runtime/requestFields';

/** Up to 4 stop sequences (OpenAI's chat limit), each 1–256 characters. */
const stopSequence = z.string().min(1).max(256);

/** A sampling field's type and range, from the one table (runtime/requestFields.ts). */
export function samplingZod(field: SamplingField): z.ZodType<number | string | string[]> {
  const r: FieldRange = SAMPLING_FIELDS[field].range;
  if (r.kind === 'stop') return z.union([stopSequence, z.array(stopSequence).min(1).max(4)]);
  const n = r.kind === 'integer' ? z.number().int() : z.number();
  return (r.kind === 'number' && r.minExclusive ? n.gt(r.min) : n.min(r.min)).max(r.max);
}

/** A numeric sampling field's zod type. */
export function numericSamplingZod(field: Exclude<SamplingField, 'stop'>): z.ZodNumber {
  return samplingZod(field) as z.ZodNumber;
}
