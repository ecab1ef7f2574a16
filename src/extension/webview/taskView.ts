// TaskInfo → the panel protocol's TaskView (no prompt, no output body).
import type { TaskView } from '../../../webview-ui/src/protocol';
import type { TaskInfo } from '../model/taskSource';

export function toTaskView(task: TaskInfo): TaskView {
  return {
    id: task.id,
    title: task.title,
    status: task.status,
    statusMessage: task.statusMessage,
    origin: task.origin ?? 'unknown',
    model: task.model,
    createdAt: task.createdAt,
    updatedAt: task.updatedAt,
    attempt: task.attempt,
    outputTokens: task.outputTokens,
    usage: task.usage,
    error: task.error ? { type: task.error.type, title: task.error.title, status: task.error.status, detail: task.error.detail, code: task.error.code } : null,
  };
}
