module slowfs/drivers/go

go 1.19
