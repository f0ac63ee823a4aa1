{{/* The name of every object: the release name, with the chart's name after it unless
it already holds it (`helm install batchsched` gives plain "batchsched"). */}}
{{- define "batchsched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "batchsched.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "batchsched.labels" -}}
{{ include "batchsched.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
{{- end -}}

{{/* The scheduler's own name, which names its leader Lease: the first of
schedulerNames, else schedulerName (the configuration's default). */}}
{{- define "batchsched.schedulerName" -}}
{{- if .Values.config.schedulerNames -}}
{{- first .Values.config.schedulerNames -}}
{{- else -}}
{{- .Values.config.schedulerName | default "batch-scheduler" -}}
{{- end -}}
{{- end -}}
